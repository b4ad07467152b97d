"""Files shipped with specbench and read at run time (the built-in prompt sets, in ``prompts/``).

``prompts`` is a symbolic link to ``<repo>/prompts``, the one home of the sets and their README;
building a wheel follows it and stores real copies, so installed copies need no checkout.
"""
