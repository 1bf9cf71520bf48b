"""Ansible for envmgr: what the fleet builder and the hosts target share.

    extravars.py  the one extra variable ``envmgr`` the playbooks read (pure; all strings unsafe)
    inventory.py  the inventory and group a URL or a spec names, and its hosts (ansible's parser)
    runner.py     ansible-runner's Python API: a playbook run, its events, its artifacts
    events.py     runner events -> per-host results, progress lines, the rollout's error (pure)
    probes.py     the probe batch the envmgr_probe role runs, and its results per host

Spec values reach a playbook only as data in the extra variable (see ``playbooks/README.md``
for the contract), never as shell text or a template.
"""
