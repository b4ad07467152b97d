"""Reading results: figures, the run report (Markdown and HTML), comparisons of runs, exports."""
