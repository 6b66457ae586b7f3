"""The lesson files: where they are, their cells and exercises, their Japanese build, the
student's own copy and progress.

Nothing here imports numpy, networkx or matplotlib, so ``collsim lesson list`` and
``collsim lesson init`` start at once; running a lesson (``collsim.teach``, the checks)
loads the simulator.
"""
