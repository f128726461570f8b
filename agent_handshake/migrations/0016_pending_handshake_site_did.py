from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("agent_handshake", "0015_interaction_fields_asked"),
    ]

    operations = [
        migrations.AddField(
            model_name="pendinghandshake",
            name="site_did",
            field=models.CharField(blank=True, default="", max_length=100),
        ),
    ]
