"""specbench: find where EAGLE-3 speculative decoding stops paying off under load in SGLang."""

__version__ = "0.1.0"
