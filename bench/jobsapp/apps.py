from django.apps import AppConfig


class BenchJobsConfig(AppConfig):
    name = "bench.jobsapp"
    label = "benchjobs"
