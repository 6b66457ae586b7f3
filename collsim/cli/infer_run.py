"""One decode run of ``collsim infer``'s flags, on the cluster and on one device, for the
report (:mod:`.infer`) and the picture of a decode step (``collsim viz decode-step``)."""

from typing import NamedTuple

__all__ = ["DecodeRun", "decode_run", "machine_of", "decode_cluster", "messages"]


class DecodeRun(NamedTuple):
    """What :func:`decode_run` ran: the machine, the split, the prompt, one device's
    generation, the cluster's :class:`~collsim.parallel.inference.InferenceRun` and the
    roofline."""

    machine: object
    split: object
    prompt: object
    expected: object
    result: object
    roofline: object


def decode_run(args):
    """Run the decode ``args`` describe (infer's flags, checked by ``infer.check_sizes``) on
    the cluster and on one device; ``collsim viz decode-step`` draws it."""
    import numpy as np

    from ..collectives.registry import canonical_algorithm
    from ..nn import Decoder, DecoderConfig
    from ..parallel.inference import generate_on_cluster
    from .flag_checks import flag_value
    from .infer_serve import checked_split, roofline_of

    machine = machine_of(args)
    algorithm = None
    if args.algorithm is not None:
        algorithm = flag_value(
            lambda name: canonical_algorithm("all_reduce", name), args.algorithm, "--algorithm"
        )
    length = args.prompt_len + args.new_tokens
    config = DecoderConfig(
        args.vocab, args.hidden, args.heads, args.layers, max_len=length, seed=args.seed
    )
    split = checked_split(args, config, algorithm)
    cluster = decode_cluster(args, machine, split.world_size)
    roofline = roofline_of(args, machine, cluster.compute_rate)
    model = Decoder.init(config)
    prompt = np.random.default_rng(args.seed).integers(0, args.vocab, (args.batch, args.prompt_len))
    expected = model.generate(prompt, args.new_tokens)
    result = generate_on_cluster(model, prompt, args.new_tokens, split, cluster, roofline)
    return DecodeRun(machine, split, prompt, expected, result, roofline)


def messages(args):
    """All-reduce calls and messages of the run, at most (a ring's 2·tp(tp-1) a call)."""
    calls = 2 * args.layers * args.new_tokens  # two a layer a step, over the stages
    tp_sent = 2 * args.tp * (args.tp - 1) * args.cp  # in each CP rank's TP group
    cp_sent = 2 * args.cp * (args.cp - 1) * args.tp  # the softmax's, in each CP group
    return calls * (1 + (args.cp > 1)), calls * (tp_sent + cp_sent)


def machine_of(args):
    from .. import hardware
    from .flag_checks import flag_value

    if args.preset is None:
        return None
    return flag_value(hardware.preset, args.preset, "--preset")


def decode_cluster(args, machine, world):
    from .. import hardware, topology
    from ..runtime import Cluster
    from ..runtime.guards import default_max_ops
    from .flag_checks import link_latency, link_rate

    # the runaway guard, raised by what this run is known to make: each message is a
    # send and a receive, each call and compute span a few operations more
    calls, sent = messages(args)
    ops = default_max_ops(world) + 2 * sent + 8 * calls * world
    if machine is None:
        link_rate(args.bandwidth, "--bandwidth"), link_latency(args.latency, "--latency")
        return Cluster(topology.switch(world, args.bandwidth, args.latency), max_ops=ops)
    nodes = -(-world // machine.gpus_per_node)
    return Cluster(hardware.topology(machine, nodes), max_ops=ops)
