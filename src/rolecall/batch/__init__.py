# the --vary keys, for help texts (here, not in batch.plan: `rolecall --help` shows it
# without importing the runtime)
KEYS_HELP = "topic, model, max_turns, role.ID.model, role.ID.persona, settings.NAME"
