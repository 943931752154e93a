"""Commands on this machine: the shell executor (`bash -c` in a process group of its own),
its background jobs, output capture and spill directories, the command environment, the
bubblewrap sandbox and its policy, and the `BashTools` plugin that gives a model the shell.
"""
