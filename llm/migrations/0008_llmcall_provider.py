from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("llm", "0007_choice_constraints"),
    ]

    operations = [
        migrations.AddField(
            model_name="llmcall",
            name="provider",
            field=models.CharField(
                blank=True,
                help_text="The administrator's provider the call went to, by name; empty: an endpoint the judge's creator brought, even at a provider's URL. Null: recorded before calls named it (the spend then goes by the judge, else the URL).",
                max_length=100,
                null=True,
            ),
        ),
    ]
