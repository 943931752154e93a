"""Tools: the seam a tool implements, and tools made from typed functions (their JSON
schema, read from the signature and the docstring, and the check of a model's arguments).
"""
