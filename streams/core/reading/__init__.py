"""Reading a step: what its call did and what its result says, computed once per step.

The monitors and the difficulty scorer both stand on this reading (`features.extract`: the
step's kinds, command, paths, error, outcome) and on the analyses under it (shell command
lines, Python cells, whether a text renders a tool's output, the result's outcome and the
linear-time scans). They depend on this package, never on each other, so a fix to how a step
is read reaches routing and steering alike.
"""
