"""Where environment groups run: in process, in local worker processes, or on a Ray cluster."""
