"""What a collective promises, as data: the executor reads it instead of the name.

A :class:`CollectiveSpec` says whether the collective reduces, whether it has a root,
what shape each rank's output has and which inputs it refuses.  The layouts -- what each
rank's working buffer holds before step 1 and which chunks are its answer -- are the
:class:`~collsim.collectives.schedule.Schedule`'s own ``start`` and ``result`` fields.
Builders attach the spec of their collective (``Schedule(..., spec=SPECS[name])``; by
default the schedule looks it up from its ``collective``); a new collective brings its
own record.

Examples
--------
>>> SPECS["all_gather"].output_shape((3, 5), 4), SPECS["reduce_scatter"].output_shape((12, 5), 4)
((12, 5), (3, 5))
>>> SPECS["reduce_scatter"].check_shape((10, 2), 4)
Traceback (most recent call last):
...
collsim.errors.ConfigError: reduce-scatter of a buffer of shape (10, 2) on 4 ranks: it \
splits the first axis, so 10 must be a multiple of 4 (nearest: 8 or 12), or pass a 1-D buffer
"""

from dataclasses import dataclass

from ..errors import ConfigError

__all__ = ["CollectiveSpec", "SPECS", "SAME", "CONCAT_FIRST_AXIS", "SPLIT_FIRST_AXIS"]

# output shape rules, as torch's collectives shape their outputs
SAME = "same"  # the input's shape (all-reduce, broadcast, reduce, all-to-all)
CONCAT_FIRST_AXIS = "concat_first_axis"  # all_gather_into_tensor: (3, 5) on 4 ranks -> (12, 5)
SPLIT_FIRST_AXIS = "split_first_axis"  # reduce_scatter_tensor: (12, 5) on 4 ranks -> (3, 5)


@dataclass(frozen=True)
class CollectiveSpec:
    """The per-collective facts the executor, the checks and the reports read."""

    name: str  # "all_reduce"
    reduces: bool = False  # combines inputs with the op (and divides for "avg")
    rooted: bool = False  # takes a ``root`` (broadcast, reduce)
    output_shape_rule: str = SAME  # SAME, CONCAT_FIRST_AXIS or SPLIT_FIRST_AXIS
    splits_first_axis: bool = False  # an N-D input is cut along axis 0: K must divide it
    equal_blocks: bool = False  # every rank gets an equal block: K must divide the count

    @property
    def label(self):
        return self.name.replace("_", "-")

    def output_shape(self, shape, k):
        """Each rank's output shape for an input of ``shape`` on ``k`` ranks; ``None``
        where it depends on the rank (a 1-D reduce-scatter's uneven chunks)."""
        shape = tuple(shape)
        if self.output_shape_rule == CONCAT_FIRST_AXIS:
            return (k * shape[0],) + shape[1:] if shape else (k,)
        if self.output_shape_rule == SPLIT_FIRST_AXIS:
            return (shape[0] // k,) + shape[1:] if len(shape) >= 2 else None
        return shape

    def check_shape(self, shape, k):
        """Refuse an N-D buffer (N >= 2) whose first axis cannot be split over ``k``
        ranks, as torch's ``reduce_scatter_tensor`` and ``all_to_all_single`` refuse it;
        a 1-D buffer may split unevenly (the first ``n mod K`` chunks one element longer)."""
        shape = tuple(shape)
        if not self.splits_first_axis or len(shape) < 2 or shape[0] % k == 0:
            return
        rows = shape[0]
        lower, upper = rows - rows % k, rows - rows % k + k
        raise ConfigError(
            f"{self.label} of a buffer of shape {shape} on {k} ranks: it splits the first "
            f"axis, so {rows} must be a multiple of {k} (nearest: {lower} or {upper}), or "
            "pass a 1-D buffer"
        )

    def check_count(self, count, k):
        """Refuse a count that ``k`` ranks cannot share in equal blocks, where they must."""
        if self.equal_blocks and count % k:
            lower, upper = count - count % k, count - count % k + k
            raise ConfigError(
                f"{self.label} of {count} elements on {k} ranks: each rank sends an equal "
                f"block to every rank, so the count must be a multiple of {k} (nearest: "
                f"{lower} or {upper})"
            )


SPECS = {
    spec.name: spec
    for spec in (
        CollectiveSpec("all_reduce", reduces=True),
        CollectiveSpec(
            "reduce_scatter",
            reduces=True,
            output_shape_rule=SPLIT_FIRST_AXIS,
            splits_first_axis=True,
        ),
        CollectiveSpec("all_gather", output_shape_rule=CONCAT_FIRST_AXIS),
        CollectiveSpec("broadcast", rooted=True),
        CollectiveSpec("reduce", reduces=True, rooted=True),
        CollectiveSpec("all_to_all", splits_first_axis=True, equal_blocks=True),
    )
}
