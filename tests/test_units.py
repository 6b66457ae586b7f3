"""Units: sizes, rates and times parse exactly as written and format back readably.

Decimal prefixes are powers of ten and binary ones powers of two, and a prefix alone is
binary, as nccl-tests reads it; ``B`` is a byte and ``b`` a bit (a rate may be in bits, a
buffer size may not).  Exact values are compared with ``==`` where the arithmetic is exact (whole
bytes, powers of two and ten); otherwise with ``pytest.approx(rel=1e-12)``.
"""

import math
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from collsim.errors import CollsimError, ConfigError
from collsim.units import (
    MAX_SIZE,
    format_rate,
    format_size,
    format_time,
    parse_rate,
    parse_size,
    parse_time,
)

# --------------------------------------------------------------------------- sizes


@pytest.mark.parametrize(
    "text, nbytes",
    [
        ("0", 0),
        ("1B", 1),
        ("1KB", 1000),
        ("1kB", 1000),
        ("1KiB", 1024),
        ("1MB", 10**6),
        ("1MiB", 2**20),
        ("64MiB", 64 * 2**20),
        ("64MB", 64 * 10**6),
        ("1GB", 10**9),
        ("1GiB", 2**30),
        ("2TB", 2 * 10**12),
        ("1TiB", 2**40),
        ("1.5KiB", 1536),
        ("512 bytes", 512),
        (" 3 KiB ", 3072),
        ("4096", 4096),
        (4096, 4096),
        (4096.0, 4096),
    ],
)
def test_parse_size_decimal_and_binary_exactly_as_written(text, nbytes):
    got = parse_size(text)
    assert got == nbytes
    assert isinstance(got, int)


@pytest.mark.parametrize(
    "text, spelling",
    [("64Mb", "64MB"), ("8b", "8B"), ("16 bit", "16B"), ("1Kbits", "1KB"), ("1Gib", "1GiB")],
)
def test_a_size_in_bits_is_refused_naming_the_byte_spelling(text, spelling):
    # issue 25, item 11: --size 64Mb silently ran an 8,000,000-byte collective
    with pytest.raises(ConfigError, match="is in bits") as info:
        parse_size(text)
    assert repr(text) in str(info.value) and f"did you mean {spelling}?" in str(info.value)


@pytest.mark.parametrize(
    "text, nbytes",
    [
        ("8", 8),
        ("1K", 2**10),
        ("1k", 2**10),
        ("64M", 64 * 2**20),
        ("64m", 64 * 2**20),
        ("8G", 8 * 2**30),
        ("8g", 8 * 2**30),
        ("1.5G", 3 * 2**29),
        ("2 T", 2 * 2**40),
        ("1P", 2**50),
    ],
)
def test_a_prefix_alone_is_binary_as_nccl_tests_reads_it(text, nbytes):
    # issue 25, item 10: nccl-tests' parsesize reads K, M and G as powers of 1,024
    assert parse_size(text) == nbytes


def test_a_unit_says_itself_beside_a_prefix_alone():
    assert parse_size("8GB") == 8 * 10**9 and parse_size("8GiB") == parse_size("8G") == 8 * 2**30


@given(st.integers(min_value=0, max_value=10**6))
def test_size_prefixes_scale_whole_numbers(n):
    assert parse_size(f"{n}KiB") == parse_size(f"{n}K") == n * 1024
    assert parse_size(f"{n}KB") == n * 1000
    assert parse_size(f"{n}MiB") == n * 2**20


@pytest.mark.parametrize(
    "bad",
    ["10 parsecs", "-1KB", "-5", "1b", "0.5B", "KiB", "", "1.5.2MB", "1mB", "nan", "inf", "1t"],
)
def test_bad_sizes_raise_naming_the_string(bad):
    with pytest.raises(CollsimError) as info:
        parse_size(bad)
    assert isinstance(info.value, ConfigError)
    assert repr(bad) in str(info.value)


@pytest.mark.parametrize("bad", [-1, -0.5, math.inf, math.nan, 1.5, True, None, [1]])
def test_bad_size_numbers_and_types_raise(bad):
    with pytest.raises(ConfigError, match="size|quantity"):
        parse_size(bad)


# --------------------------------------------------------------------------- rates


@pytest.mark.parametrize(
    "text, rate",
    [
        ("100GB/s", 100e9),
        ("100 GB/s", 100e9),
        ("1GiB/s", float(2**30)),
        ("900GB/s", 900e9),
        ("400Gbit/s", 50e9),
        ("400Gb/s", 50e9),
        ("25Gbps", 25e9 / 8),
        ("100GBps", 100e9),
        ("8b/s", 1.0),
        ("1KB/s", 1e3),
        ("1KiB/s", 1024.0),
        (1e9, 1e9),
        (7, 7.0),
    ],
)
def test_parse_rate(text, rate):
    assert parse_rate(text) == pytest.approx(rate, rel=1e-12)


def test_bits_and_bytes_per_second_differ_by_eight():
    assert parse_rate("100GB/s") == 8 * parse_rate("100Gb/s")
    assert parse_rate("400Gbit/s") == parse_rate("400Gb/s") == parse_rate("50GB/s")


@pytest.mark.parametrize("text", ["inf", "Inf", "infinity", math.inf])
def test_infinite_bandwidth_is_a_free_link(text):
    assert parse_rate(text) == math.inf


@pytest.mark.parametrize("bad", ["10 parsecs", "0GB/s", "0", "-5GB/s", "100GB", "fast", "GB/s"])
def test_bad_rates_raise_naming_the_string(bad):
    with pytest.raises(ConfigError) as info:
        parse_rate(bad)
    assert repr(bad) in str(info.value)


@pytest.mark.parametrize("bad", [0, 0.0, -1e9, math.nan, False, None])
def test_zero_negative_or_non_numeric_bandwidth_raises(bad):
    with pytest.raises(CollsimError):
        parse_rate(bad)


# --------------------------------------------------------------------------- times


@pytest.mark.parametrize(
    "text, seconds",
    [
        ("5us", 5e-6),
        ("5µs", 5e-6),
        ("2ms", 2e-3),
        ("10ns", 1e-8),
        ("1s", 1.0),
        ("1.5s", 1.5),
        ("0", 0.0),
        ("0.0", 0.0),
        ("0us", 0.0),
        (0, 0.0),
        (2.5e-6, 2.5e-6),
    ],
)
def test_parse_time(text, seconds):
    # dividing by the unit (5 / 1e6) is exact to the nearest float, so == holds
    assert parse_time(text) == seconds


@pytest.mark.parametrize("text", ["5", "1.5", "1e-6", " 2 "])
def test_a_time_without_a_unit_is_refused_as_a_bandwidth_is(text):
    # issue 25, item 12: --latency 5 silently meant 5 s per link
    with pytest.raises(ConfigError, match="has no unit") as info:
        parse_time(text)
    number = text.strip()
    assert repr(text) in str(info.value) and f"{number}s, {number}ms or {number}us" in str(
        info.value
    )


def test_zero_latency_is_a_free_link():
    assert parse_time(0) == 0.0
    assert parse_time("0s") == 0.0


@pytest.mark.parametrize("bad", ["10 parsecs", "-1us", "5 minutes", "us", "1e400s", "5 Us"])
def test_bad_times_raise_naming_the_string(bad):
    with pytest.raises(ConfigError) as info:
        parse_time(bad)
    assert repr(bad) in str(info.value)


@pytest.mark.parametrize("bad", [-1e-6, math.inf, math.nan, None])
def test_bad_time_numbers_raise(bad):
    with pytest.raises(ConfigError):
        parse_time(bad)


# --------------------------------------------------------------------------- formatting


@pytest.mark.parametrize(
    "nbytes, binary, text",
    [
        (0, True, "0 B"),
        (100, True, "100 B"),
        (1024, True, "1 KiB"),
        (1536, True, "1.5 KiB"),
        (64 * 2**20, True, "64 MiB"),
        (2**30, True, "1 GiB"),
        (10**9, False, "1 GB"),
        (64 * 2**20, False, "67.11 MB"),
    ],
)
def test_format_size(nbytes, binary, text):
    assert format_size(nbytes, binary=binary) == text


@pytest.mark.parametrize(
    "rate, text",
    [(100e9, "100 GB/s"), (50e9, "50 GB/s"), (1.5e3, "1.5 KB/s"), (math.inf, "inf B/s")],
)
def test_format_rate(rate, text):
    assert format_rate(rate) == text


@pytest.mark.parametrize(
    "seconds, text", [(0, "0 s"), (5e-6, "5 us"), (2e-3, "2 ms"), (1.5, "1.5 s"), (3e-9, "3 ns")]
)
def test_format_time(seconds, text):
    assert format_time(seconds) == text


@given(st.floats(min_value=1e-9, max_value=1e4, allow_nan=False))
def test_format_time_reads_back_to_four_significant_digits(seconds):
    assert parse_time(format_time(seconds).replace(" ", "")) == pytest.approx(seconds, rel=1e-3)


@given(st.integers(min_value=1, max_value=2**50))
def test_format_size_reads_back_to_four_significant_digits(nbytes):
    text = format_size(nbytes).replace(" ", "")
    number, unit = text[:-3], text[-3:]  # e.g. "1.5", "KiB"
    if not unit.endswith("iB"):
        number, unit = text[:-1], "B"
    factor = parse_size(f"1{unit}")
    assert float(number) * factor == pytest.approx(nbytes, rel=1e-3)


def test_compute_rates_parse_and_the_cluster_accepts_them():
    import collsim
    from collsim.units import parse_flops

    assert parse_flops("150TFLOP/s") == 150e12 and parse_flops("989T") == 989e12
    assert parse_flops("inf") == float("inf")
    cluster = collsim.Cluster(collsim.topology.ring(2), compute_rate="1GFLOP/s")
    assert cluster.compute_rate == 1e9
    with pytest.raises(collsim.ConfigError, match="fast"):
        collsim.Cluster(collsim.topology.ring(2), compute_rate="fast")


# --------------------------------------------------------------------------- edges (item 11)


@pytest.mark.parametrize("parse", [parse_size, parse_rate, parse_time])
@pytest.mark.parametrize("text", ["", "   "])
def test_an_empty_string_is_named_as_empty(parse, text):
    with pytest.raises(ConfigError, match=f"{text!r} is empty"):
        parse(text)


@pytest.mark.parametrize(
    "parse, text, units",
    [
        (parse_size, "64XB", "KiB, MB, MiB"),
        (parse_size, "2EiB", "PB, PiB"),
        (parse_rate, "100GB/h", "GB/s"),
        (parse_time, "5min", "ns, us (or µs), ms, s"),
    ],
)
def test_an_unknown_suffix_lists_the_valid_ones(parse, text, units):
    with pytest.raises(ConfigError) as info:
        parse(text)
    assert repr(text) in str(info.value) and units in str(info.value)


@pytest.mark.parametrize("bad", ["2EiB", 2**61, "1e30B", 10**400, "1e300GB"])
def test_sizes_past_an_exbibyte_are_refused(bad):
    with pytest.raises(ConfigError, match=re.escape(str(bad)[:20])):
        parse_size(bad)


def test_integer_sizes_are_exact_up_to_the_bound():
    assert parse_size(MAX_SIZE) == MAX_SIZE and parse_size(2**53 + 1) == 2**53 + 1
    assert parse_size(np.int64(4096)) == 4096 and parse_size(np.float64(8.0)) == 8


@pytest.mark.parametrize("text", ["1e308GB/s", "1e308Tbit/s"])
def test_a_rate_that_overflows_is_refused_not_taken_as_free(text):
    with pytest.raises(ConfigError, match="too large"):
        parse_rate(text)


@pytest.mark.parametrize("bad", [np.float64("nan"), np.True_, "nan", "-inf"])
def test_numpy_scalars_and_nan_strings_are_refused(bad):
    for parse in (parse_size, parse_rate, parse_time):
        with pytest.raises(ConfigError):
            parse(bad)


@pytest.mark.parametrize("fmt", [format_size, format_rate, format_time])
@pytest.mark.parametrize("bad", ["64MiB", None, [1], True])
def test_formatters_refuse_what_is_not_a_number(fmt, bad):
    with pytest.raises(ConfigError, match=re.escape(repr(bad))):
        fmt(bad)


@pytest.mark.parametrize(
    "rate, text",
    [
        (1.5e14, "150 TFLOP/s"),
        (3.12e14, "312 TFLOP/s"),
        (2e15, "2 PFLOP/s"),
        (5e9, "5 GFLOP/s"),
        (12.0, "12 FLOP/s"),
        (float("inf"), "inf FLOP/s"),
    ],
)
def test_format_flops_reads_like_a_datasheet(rate, text):
    from collsim import units

    assert units.format_flops(rate) == text
    if "TFLOP" in text or "PFLOP" in text or "GFLOP" in text:
        assert units.parse_flops(text.replace(" ", "")) == pytest.approx(rate, rel=1e-12)
