"""ALFWorld plug-in: text household games (TextWorld/PDDL)."""
