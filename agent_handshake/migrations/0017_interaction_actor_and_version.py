from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("agent_handshake", "0016_pending_handshake_site_did"),
    ]

    operations = [
        migrations.AddField(
            model_name="interaction",
            name="protocol_version",
            field=models.CharField(default="1.0", max_length=16),
        ),
        # None for the interactions started before: they stay bound to their credentials alone.
        migrations.AddField(
            model_name="interaction",
            name="actor_id",
            field=models.CharField(blank=True, default=None, max_length=500, null=True),
        ),
        migrations.AddField(
            model_name="interaction",
            name="actor_verified",
            field=models.BooleanField(default=False),
        ),
    ]
