"""Megatron-LM's 784-GPU error, planned: 784 GPUs with tp=8 and pp=4 for a GPT-3-sized model.

Megatron-LM stops at its first assertion::

    AssertionError: world size is not divisible by tensor parallel size (8) times
    pipeline parallel size (4)

because 784 / (8·4) = 24.5 is not a whole number of data-parallel replicas.  The planner
checks every rule at once, names each broken one with its numbers and the nearest valid
choices, says plainly when no configuration of 784 GPUs can work for this model and
global batch (784 = 2^4·7^2, and every dp it allows keeps the factor 7^2 that 1536 lacks),
and suggests complete valid configurations.

Run it with ``python examples/plan_784_gpus.py``; the same from the command line::

    collsim plan --world-size 784 --tp 8 --pp 4 --layers 96 --hidden 12288 --heads 96 \\
                 --seq 2048 --global-batch 1536 --micro-batch 1
"""

from collsim.plan import plan

GPT3 = dict(layers=96, hidden=12288, heads=96, seq=2048)  # about 175 B parameters

report = plan(world_size=784, tp=8, pp=4, global_batch=1536, micro_batch=1, **GPT3)
print(report)

print("\nThe rules it broke:", [v.rule for v in report.violations])
best = report.suggestions[0]
print(f"Best suggestion: {best.describe()}")

# the first suggestion is itself a valid plan: check it again and show its memory
fixed = plan(best.config)
assert fixed.valid, fixed
memory = fixed.memory
print(
    f"With it: dp={fixed.derived['dp']}, accumulation={fixed.derived['accumulation']}, "
    f"{memory['total'] / 2**30:.1f} GiB of {memory['gpu_memory'] / 2**30:.0f} GiB per GPU, "
    f"step {fixed.step_time_s:.1f} s"
)
