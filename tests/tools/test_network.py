"""HostNetwork: hosts on a private switch, links rate-limited with tc (no TensorFlow here).

The tests that make namespaces need root and iproute2; they are skipped elsewhere.
"""

import subprocess
import sys
import time

import pytest

from benchmarks.common import network


@pytest.mark.parametrize(
    ("rate", "bits"),
    [("1gbit", 1e9), ("100mbit", 1e8), ("2.5gbit", 2.5e9), ("500kbit", 5e5), ("64000bit", 64e3)],
)
def test_rates_read_as_tc_reads_them(rate, bits):
    assert network.rate_bits_per_sec(rate) == bits


@pytest.mark.parametrize("rate", ["1 gbit", "1gbps", "0gbit", "-1mbit", "fast", "", 1e9])
def test_a_malformed_rate_is_refused_before_anything_is_made(rate):
    with pytest.raises(ValueError, match=r"rate must look like .*, got " + repr(rate)):
        network.HostNetwork({"h1": 1}, rate=rate)


@pytest.mark.parametrize("byte", [0, 255, "1", 1.0])
def test_an_address_byte_out_of_range_is_refused(byte):
    with pytest.raises(ValueError, match=r"hosts\['h1'\] must be an address byte"):
        network.HostNetwork({"h1": byte})


@pytest.fixture
def needs_namespaces():
    reason = network.unavailable_reason(rate="1gbit")
    if reason:
        pytest.skip(f"needs network namespaces and tc: {reason}")


def _tbf_rates(net, host):
    """The tbf rates on `host`'s eth0 and on its switch port, as `tc` shows them."""
    shown = []
    for namespace, device in ((net.namespace(host), "eth0"), (net.switch, host)):
        qdisc = subprocess.run(
            ["ip", "netns", "exec", namespace, "tc", "qdisc", "show", "dev", device],
            capture_output=True, text=True, check=True, timeout=30,
        ).stdout  # fmt: skip
        shown.append(qdisc.split(" rate ")[1].split()[0] if " tbf " in qdisc else None)
    return shown


@pytest.mark.root
@pytest.mark.netns
def test_hosts_reach_each_other_through_limited_links(needs_namespaces):
    with network.HostNetwork({"ha": 1, "hb": 2}, rate="100mbit") as net:
        assert _tbf_rates(net, "ha") == _tbf_rates(net, "hb") == ["100Mbit", "100Mbit"]
        # 2 MB from ha to hb at 100 Mbit/s (12.5 MB/s on the line) take >= 0.15 s; unshaped
        # veth links move it in a few milliseconds here.
        server = subprocess.Popen(
            [*net.exec_prefix("hb"), sys.executable, "-c",
             "import socket; s = socket.create_server(('0.0.0.0', 5000)); c, _ = s.accept()\n"
             "n = 0\nwhile (d := c.recv(1 << 16)): n += len(d)\nprint(n)"],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        client = [
            *net.exec_prefix("ha"), sys.executable, "-c",
            "import socket, time\n"
            "for _ in range(100):\n"
            "    try: s = socket.create_connection(('10.213.0.2', 5000)); break\n"
            "    except OSError: time.sleep(0.05)\n"
            "s.sendall(b'x' * 2_000_000); s.close()",
        ]  # fmt: skip
        started = time.monotonic()
        subprocess.run(client, capture_output=True, check=True, timeout=60)
        assert server.communicate(timeout=30)[0].strip() == "2000000"
        assert time.monotonic() - started >= 0.15
        tx_bytes, _ = net.link_bytes("ha")
        assert tx_bytes > 2_000_000  # Payload plus the frames' headers.
        prefix = net.prefix
    listed = network.run_ip("netns", "list", check=False).stdout
    assert prefix not in listed


@pytest.mark.root
@pytest.mark.netns
def test_set_rate_shapes_one_host_changes_it_and_lifts_it(needs_namespaces):
    with network.HostNetwork({"ha": 1, "hb": 2}) as net:
        assert _tbf_rates(net, "ha") == [None, None]
        net.set_rate("ha", "1gbit")
        assert _tbf_rates(net, "ha") == ["1Gbit", "1Gbit"]
        assert _tbf_rates(net, "hb") == [None, None]  # The other host's link is untouched.
        net.set_rate("ha", "10gbit")  # Replaced in place, both ways.
        assert _tbf_rates(net, "ha") == ["10Gbit", "10Gbit"]
        net.set_rate("ha", None)
        assert _tbf_rates(net, "ha") == [None, None]
        net.set_rate("ha", None)  # Lifting a limit that is not there does nothing.
        with pytest.raises(ValueError, match="rate must look like"):
            net.set_rate("ha", "10 gbit")


@pytest.mark.parametrize(
    ("cpus", "mask"),
    [([0], "1"), ((1,), "2"), ([0, 1], "3"), ([1, 1], "2"), ([31], "80000000"),
     ([32], "1,00000000"), ([0, 33, 64], "1,00000002,00000001")],
)  # fmt: skip
def test_cpu_masks_set_one_bit_per_cpu_in_groups_of_32(cpus, mask, monkeypatch):
    monkeypatch.setattr(network.os, "cpu_count", lambda: 65)
    assert network.cpu_mask(cpus) == mask


@pytest.mark.parametrize("cpus", [[], [2], [-1], ["0"], [True], 1, "01", None])
def test_a_cpu_the_machine_lacks_is_refused(cpus, monkeypatch):
    monkeypatch.setattr(network.os, "cpu_count", lambda: 2)
    with pytest.raises(ValueError, match=r"cpus must be a list of CPU ids in 0\.\.1, got "):
        network.cpu_mask(cpus)


@pytest.mark.root
@pytest.mark.netns
def test_receives_are_steered_on_every_interface_of_the_network(needs_namespaces):
    with network.HostNetwork({"ha": 1, "hb": 2}, rate="1gbit") as net:
        net.steer_receives([0])
        # Each host has lo and eth0; the switch lo, br0 and one port per host.
        masks = []
        for namespace in (net.namespace("ha"), net.namespace("hb"), net.switch):
            shown = subprocess.run(
                [*["ip", "netns", "exec", namespace], "sh", "-c",
                 "cat /sys/class/net/*/queues/rx-*/rps_cpus"],
                capture_output=True, text=True, check=True, timeout=30,
            ).stdout.split()  # fmt: skip
            masks.append(shown)
        assert [len(shown) for shown in masks] == [2, 2, 4]
        # The kernel pads the mask to its CPU count's width: "1" reads back as "1" or "01".
        assert {int(mask, 16) for shown in masks for mask in shown} == {1}
