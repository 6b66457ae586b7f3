"""The collective methods of a :class:`~collsim.runtime.cluster.Cluster`: one collective
on the whole cluster (or a group) from plain code, each a thin call into
:func:`collsim.collectives.api.run_collective`.

Examples
--------
>>> import numpy as np, collsim
>>> cluster = collsim.Cluster(collsim.topology.ring(2))
>>> cluster.all_reduce([np.ones(2), np.full(2, 2.0)]).outputs[1].tolist()
[3.0, 3.0]
"""

__all__ = ["CollectiveCalls"]


class CollectiveCalls:
    """``all_reduce``, ``reduce_scatter``, ``all_gather``, ``broadcast``, ``reduce``,
    ``all_to_all`` and ``collective(name, ...)`` for :class:`~collsim.runtime.cluster.Cluster`,
    which supplies the cluster they run on (``self``)."""

    def collective(self, name, buffers=None, **options):
        """Run collective ``name`` once; see :func:`collsim.collectives.api.run_collective`.

        ``name`` is any spelling of a collective (``"all_reduce"``, ``"all-reduce"``,
        ``"allreduce"``); ``options`` are those of the named method below.

        >>> import numpy as np, collsim
        >>> cluster = collsim.Cluster(collsim.topology.ring(2))
        >>> cluster.collective("all-reduce", [np.ones(2), np.ones(2)]).outputs[0].tolist()
        [2.0, 2.0]
        """
        from ..collectives.api import run_collective

        return run_collective(self, name, buffers, **options)

    def all_reduce(
        self,
        buffers=None,
        *,
        protocol=None,
        algorithm=None,
        op="sum",
        group=None,
        count=None,
        dtype="float32",
        root=0,
    ):
        """Every rank ends with the reduction of every rank's buffer.

        Parameters
        ----------
        buffers : list of numpy.ndarray, optional
            One array per group rank, all of one shape and dtype (float64, float32,
            float16, int64 or int32): the numeric mode, which moves the values.  Leave
            it out for the count-only mode, which moves sizes alone (``count``, ``dtype``).
        algorithm : {"ring", "tree", "halving_doubling", "naive"}, optional
            Default ``"ring"``; also ``"hd"`` or ``"rabenseifner"`` for halving-doubling
            and ``"binomial"`` for the tree.
        op : {"sum", "avg", "prod", "max", "min"}, default "sum"
            Or anything whose ``.name`` is one (``torch.distributed.ReduceOp.SUM``).
            Integer ``avg`` truncates toward zero, as NCCL's ``ncclAvg`` does.
        group : list of int or Group, optional
            The ranks taking part (default: all), in group order.
        count : int, optional
            Count-only mode: elements per rank (an int >= 0, as nccl-tests counts them).
        dtype : {"float32", "float64", "float16", "bfloat16", "int64", "int32"}
            Count-only mode: the element type, for its size.
        root : int, default 0
            The group rank the ``"naive"`` algorithm gathers to (ignored by the others).
        protocol : {None, "auto", "simple", "ll128", "ll"}, optional
            NCCL's wire protocol for this call (default: the cluster's ``protocol``); every
            collective method takes it.

        Returns
        -------
        CollectiveResult
            ``outputs[r]`` (same shape as the input; ``None`` in count-only mode),
            ``stats`` (bytes per rank, steps), ``time`` (simulated s), ``trace``,
            ``steps()`` (the step-through).

        Examples
        --------
        >>> import numpy as np, collsim
        >>> cluster = collsim.Cluster(collsim.topology.ring(4, "100GB/s", "5us"))
        >>> out = cluster.all_reduce([np.full((2, 3), r) for r in range(4)], op="avg")
        >>> out.outputs[0].tolist(), out.stats.steps
        ([[1, 1, 1], [1, 1, 1]], 6)
        >>> cluster.all_reduce(count=2**20, dtype="bfloat16", algorithm="tree").stats.steps
        4
        """
        return self.collective(
            "all_reduce",
            buffers,
            protocol=protocol,
            algorithm=algorithm,
            op=op,
            group=group,
            count=count,
            dtype=dtype,
            root=root,
        )

    def reduce_scatter(
        self,
        buffers=None,
        *,
        protocol=None,
        algorithm=None,
        op="sum",
        group=None,
        count=None,
        dtype="float32",
    ):
        """Group rank r ends with part r of the reduction, split along the first axis.

        As torch's ``reduce_scatter_tensor``: a (12, 5) buffer on 4 ranks gives each a
        (3, 5) part, so K must divide the first axis of an N-D buffer.  A 1-D buffer may
        split unevenly: its first ``n mod K`` parts are one element longer.

        Parameters
        ----------
        buffers : list of numpy.ndarray, optional
            One array per group rank, one shape and dtype; leave out for count-only.
        algorithm : {"ring"}, optional
            The only one (default).
        op : {"sum", "avg", "prod", "max", "min"}, default "sum"
        group : list of int or Group, optional
            The ranks taking part (default: all).
        count : int, optional
            Count-only mode: elements in each rank's input.
        dtype : str, default "float32"
            Count-only mode: the element type (see :meth:`all_reduce`).

        Returns
        -------
        CollectiveResult

        Examples
        --------
        >>> import numpy as np, collsim
        >>> cluster = collsim.Cluster(collsim.topology.ring(4))
        >>> out = cluster.reduce_scatter([np.ones((12, 5))] * 4)
        >>> out.outputs[1].shape, float(out.outputs[1][0, 0]), out.stats.steps
        ((3, 5), 4.0, 3)
        """
        return self.collective(
            "reduce_scatter",
            buffers,
            protocol=protocol,
            algorithm=algorithm,
            op=op,
            group=group,
            count=count,
            dtype=dtype,
        )

    def all_gather(
        self,
        buffers=None,
        *,
        protocol=None,
        algorithm=None,
        group=None,
        count=None,
        dtype="float32",
    ):
        """Every rank ends with every rank's buffer, concatenated along the first axis.

        As torch's ``all_gather_into_tensor``: a (3, 5) buffer on 4 ranks gives (12, 5),
        group rank r's rows at ``[3 * r : 3 * r + 3]``; a 0-d buffer gives (K,).

        Parameters
        ----------
        buffers : list of numpy.ndarray, optional
            One array per group rank, one shape and dtype; leave out for count-only.
        algorithm : {"ring"}, optional
            The only one (default).
        group : list of int or Group, optional
            The ranks taking part (default: all).
        count : int, optional
            Count-only mode: elements in each rank's input (S/K of nccl-tests' S).
        dtype : str, default "float32"
            Count-only mode: the element type (see :meth:`all_reduce`).

        Returns
        -------
        CollectiveResult

        Examples
        --------
        >>> import numpy as np, collsim
        >>> cluster = collsim.Cluster(collsim.topology.ring(4))
        >>> out = cluster.all_gather([np.full((3, 5), r) for r in range(4)])
        >>> out.outputs[0].shape, out.outputs[0][:, 0].tolist()
        ((12, 5), [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3])
        """
        return self.collective(
            "all_gather",
            buffers,
            protocol=protocol,
            algorithm=algorithm,
            group=group,
            count=count,
            dtype=dtype,
        )

    def broadcast(
        self,
        buffers=None,
        *,
        protocol=None,
        root=0,
        algorithm=None,
        group=None,
        count=None,
        dtype="float32",
    ):
        """Every rank ends with group rank ``root``'s buffer (same shape).

        Parameters
        ----------
        buffers : list of numpy.ndarray, optional
            One array per group rank (only the root's values matter; all must have one
            shape and dtype, as the receivers' buffers do in torch); leave out for
            count-only.
        root : int, default 0
            The sending group rank, 0..K-1.
        algorithm : {"tree", "ring"}, optional
            Default ``"tree"`` (binomial); ``"ring"`` (or ``"chain"``) is the pipelined
            chain root -> root+1 -> ... along the ring's links, in K chunks.
        group : list of int or Group, optional
            The ranks taking part (default: all).
        count : int, optional
            Count-only mode: elements per rank.
        dtype : str, default "float32"
            Count-only mode: the element type (see :meth:`all_reduce`).

        Returns
        -------
        CollectiveResult

        Examples
        --------
        >>> import numpy as np, collsim
        >>> cluster = collsim.Cluster(collsim.topology.ring(4))
        >>> out = cluster.broadcast([np.full(4, r) for r in range(4)], root=2, algorithm="ring")
        >>> [o.tolist() for o in out.outputs][3], out.stats.steps
        ([2, 2, 2, 2], 6)
        """
        return self.collective(
            "broadcast",
            buffers,
            protocol=protocol,
            root=root,
            algorithm=algorithm,
            group=group,
            count=count,
            dtype=dtype,
        )

    def reduce(
        self,
        buffers=None,
        *,
        protocol=None,
        root=0,
        algorithm=None,
        op="sum",
        group=None,
        count=None,
        dtype="float32",
    ):
        """Group rank ``root`` ends with the reduction (same shape); the others get ``None``.

        Parameters
        ----------
        buffers : list of numpy.ndarray, optional
            One array per group rank, one shape and dtype; leave out for count-only.
        root : int, default 0
            The receiving group rank, 0..K-1.
        algorithm : {"tree", "ring"}, optional
            Default ``"tree"`` (binomial); ``"ring"`` (or ``"chain"``) is the pipelined
            chain root+1 -> root+2 -> ... -> root along the ring's links: the ring
            broadcast run backwards, in the same steps and time.
        op : {"sum", "avg", "prod", "max", "min"}, default "sum"
        group : list of int or Group, optional
            The ranks taking part (default: all).
        count : int, optional
            Count-only mode: elements per rank.
        dtype : str, default "float32"
            Count-only mode: the element type (see :meth:`all_reduce`).

        Returns
        -------
        CollectiveResult

        Examples
        --------
        >>> import numpy as np, collsim
        >>> cluster = collsim.Cluster(collsim.topology.ring(3))
        >>> out = cluster.reduce([np.arange(3) * r for r in range(3)], root=1, op="max")
        >>> out.outputs
        [None, array([0, 2, 4]), None]
        """
        return self.collective(
            "reduce",
            buffers,
            protocol=protocol,
            root=root,
            algorithm=algorithm,
            op=op,
            group=group,
            count=count,
            dtype=dtype,
        )

    def all_to_all(
        self,
        buffers=None,
        *,
        protocol=None,
        algorithm=None,
        group=None,
        count=None,
        dtype="float32",
    ):
        """Part j of group rank r's buffer ends as part r of rank j's (same shape).

        As torch's ``all_to_all_single``: parts are equal blocks along the first axis
        (1-D: of the elements), so K must divide it.

        Parameters
        ----------
        buffers : list of numpy.ndarray, optional
            One array per group rank, one shape and dtype; leave out for count-only.
        algorithm : {"direct"}, optional
            The only one (default): step s sends part r+s straight to rank r+s.
        group : list of int or Group, optional
            The ranks taking part (default: all).
        count : int, optional
            Count-only mode: elements per rank, a multiple of K.
        dtype : str, default "float32"
            Count-only mode: the element type (see :meth:`all_reduce`).

        Returns
        -------
        CollectiveResult

        Examples
        --------
        >>> import numpy as np, collsim
        >>> cluster = collsim.Cluster(collsim.topology.switch(2))
        >>> out = cluster.all_to_all([np.array([[0, 1], [2, 3]]), np.array([[4, 5], [6, 7]])])
        >>> out.outputs[0].tolist(), out.outputs[1].tolist()
        ([[0, 1], [4, 5]], [[2, 3], [6, 7]])
        """
        return self.collective(
            "all_to_all",
            buffers,
            protocol=protocol,
            algorithm=algorithm,
            group=group,
            count=count,
            dtype=dtype,
        )
