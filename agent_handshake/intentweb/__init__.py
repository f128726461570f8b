"""IntentWeb 1.0 front door: /intentmanifest.yaml and POST /intent."""
