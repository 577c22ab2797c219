"""Names the command line and the agent share, in a module light enough for argument parsing."""

ROLE_BACKENDS = ("offline", "anthropic", "openai")
"""who plays the engine, critic and compiler roles (offline needs no network or key)"""

RUN_MODES = ("orchestrated", "autonomous")
"""orchestrated: the loop calls the tools; autonomous: an LLM runs the rounds through the tools"""
