"""Packets by format string: every conversion there and back, and the
errors a caller gets for a bad format or a mismatch (no tree needed)."""
import pytest

import tbon
from tbon import Packet, _new_packet


def round_trip(fmt, *values):
    return Packet(_new_packet(100, fmt, values)).values


@pytest.mark.parametrize("fmt,value", [
    ("%c", -5), ("%uc", 250), ("%hd", -30000), ("%uhd", 65000), ("%d", -2 ** 31),
    ("%ud", 2 ** 32 - 1), ("%ld", -2 ** 63), ("%uld", 2 ** 64 - 1), ("%lf", 1.0 / 3),
    ("%f", 0.5), ("%s", "héllo, tbon"), ("%s", ""),
])
def test_scalars(fmt, value):
    assert round_trip(fmt, value) == (value,)


@pytest.mark.parametrize("fmt,value", [
    ("%ad", [1, -2, 3]), ("%aud", [0, 2 ** 32 - 1]), ("%ald", [-2 ** 63, 7]),
    ("%auld", [2 ** 64 - 1]), ("%ahd", [-1, 1]), ("%auhd", [65535]), ("%alf", [0.25, -1e300]),
    ("%af", [1.5]), ("%auc", b"\x00\xffbytes"), ("%ac", b"abc"), ("%as", ["a", "", "b c"]),
    ("%ad", []), ("%as", []),
])
def test_arrays(fmt, value):
    assert round_trip(fmt, value) == (value,)


def test_several_fields_and_the_packets_face():
    p = Packet(_new_packet(123, "%ud %s %alf", (7, "int", [1.0, 2.5])))
    assert (p.tag, p.format) == (123, "%ud %s %alf")
    assert p.values == (7, "int", [1.0, 2.5])
    assert p.unpack("%ud   %s %alf") == (7, "int", [1.0, 2.5])


def test_a_format_that_does_not_match_names_both():
    p = Packet(_new_packet(100, "%ld", (5,)))
    with pytest.raises(tbon.Error) as e:
        p.unpack("%d")
    assert e.value.code == tbon.EFORMAT
    assert '"%d" does not match the packet\'s "%ld"' in str(e.value)


def test_bad_formats_and_values_are_refused():
    with pytest.raises(tbon.Error):
        _new_packet(100, "%q", (1,))
    with pytest.raises(tbon.Error):
        _new_packet(100, "%d %d", (1,))
    for fmt, v in (("%d", 2 ** 40), ("%ud", -1), ("%uc", 256), ("%ad", [1, 2 ** 31])):
        with pytest.raises(tbon.Error) as e:
            _new_packet(100, fmt, (v,))
        assert "does not fit" in str(e.value)
