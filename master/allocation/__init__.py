"""The allocation policy: who is offered what, and who gives back what. Pure: no I/O.

The master's shell and the simulator drive the same code, through the same offer cycle
(`master.cycle`): the role order (flat `sorter`, hierarchical `role_tree`), `quota`, the
`allocator`, the fair share (`ideal`, `tree_ideal`) and the preemption policy
(`preemption`).
"""
