"""Servers that specbench launches (real SGLang, the simulator) or attaches to."""
