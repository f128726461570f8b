"""Schema templates front door (draft-zhou-structured-data-schema-interaction): GET and POST /schema-templates."""
