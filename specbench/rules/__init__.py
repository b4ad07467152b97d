"""Rules the configuration and the load generator share, as leaf modules (no specbench imports
but errors), so that neither reaches into the other."""
