"""cmc: a model checker that checks the real program, not a model of it."""
__version__ = "0.1.0"
