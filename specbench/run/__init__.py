"""Running a sweep: its plan, run directory and progress; one node, several GPUs, Ray, SLURM."""
