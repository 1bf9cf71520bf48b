"""verify takes envmgr's own spelling of an inventory (issue 29), and a generation is verified
the way its target offers, or refused with what to give instead."""

from __future__ import annotations

import pytest

from envmgr.errors import UsageError
from envmgr.targets.hosts import HostsTarget
from envmgr.verify.run import for_testinfra


@pytest.mark.parametrize(("given", "sent"), [
    ("ansible://gpu?inventory=/etc/h.yml", "ansible://gpu?ansible_inventory=%2Fetc%2Fh.yml"),
    ("ansible://gpu?ansible_inventory=/etc/h.yml", "ansible://gpu?ansible_inventory=%2Fetc%2Fh.yml"),
    ("ansible://gpu?inventory=h.yml&force_ansible=true", "ansible://gpu?ansible_inventory=h.yml&force_ansible=true"),
    ("ansible://gpu", "ansible://gpu"),
    ("ssh://root@h?inventory=x", "ssh://root@h?inventory=x"),  # only ansible:// has an inventory
])
def test_either_spelling_of_the_inventory_reaches_testinfra_in_its_own(given, sent):
    assert for_testinfra(given) == sent


def test_both_spellings_at_once_are_refused():
    with pytest.raises(UsageError, match="not both"):
        for_testinfra("ansible://gpu?inventory=a&ansible_inventory=b")


def test_a_fleet_generation_is_verified_with_hosts():
    with pytest.raises(UsageError, match="verified with --hosts") as info:
        with HostsTarget("ansible://gpu?inventory=/h.yml").testinfra_url():
            pass
    assert "--hosts ansible://GROUP?inventory=FILE" in (info.value.hint or "")
