#!/usr/bin/python
"""envmgr_file: a small text file with the given content, in one module run.

``ansible.builtin.copy`` with ``content:`` costs two module runs (a remote stat, then
``copy`` or ``file``) and three more commands for its temporary directory on every host,
changed or not; the roles write a few small files on every provision (the apt
repository and pin, the spec's env, completion markers, locks), so this module does the
same job in one: it compares, writes atomically (a temporary file in the same directory,
then a rename) only when the content differs, applies ``mode``/owner like ``copy`` (the
common file arguments), and supports check mode and ``--diff``. Like ``copy`` with
``follow: false``, a symlink at ``path`` is replaced by the file; a missing directory is
an error, not created (in check mode, a change: an earlier task would have made it).
"""

from __future__ import annotations

DOCUMENTATION = r"""
module: envmgr_file
short_description: Write a small text file with the given content (one round trip)
options:
  path: {description: The file to write., type: path, required: true}
  content: {description: Its whole content., type: str, required: true}
extends_documentation_fragment: [ansible.builtin.files]
"""

import os
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_bytes, to_text


def main() -> None:
    module = AnsibleModule(
        argument_spec={"path": {"type": "path", "required": True},
                       "content": {"type": "str", "required": True}},
        add_file_common_args=True, supports_check_mode=True)
    path = module.params["path"]
    b_path = to_bytes(path, errors="surrogate_or_strict")
    b_content = to_bytes(module.params["content"], errors="surrogate_or_strict")
    directory = os.path.dirname(b_path)
    if not os.path.isdir(directory) and not module.check_mode:  # check mode: a task before makes it
        module.fail_json(msg=f"Destination directory {to_text(directory)} does not exist", path=path)

    before = None
    if os.path.isfile(b_path) and not os.path.islink(b_path):
        with open(b_path, "rb") as current:
            before = current.read()
    changed = before != b_content
    diff = {"before_header": path, "after_header": path,
            "before": to_text(before or b"", errors="surrogate_or_strict"),
            "after": to_text(b_content, errors="surrogate_or_strict")}

    if changed and not module.check_mode:
        fd, b_temp = tempfile.mkstemp(dir=directory, prefix=b".envmgr-file-")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(b_content)
            module.atomic_move(b_temp, b_path)
        except BaseException:
            if os.path.exists(b_temp):
                os.unlink(b_temp)
            raise

    if os.path.exists(b_path) or not module.check_mode:
        file_args = module.load_file_common_arguments(module.params, path=path)
        changed = module.set_fs_attributes_if_different(file_args, changed)  # mode/owner: not in the text diff
    module.exit_json(changed=changed, path=path, diff=diff if changed else {})


if __name__ == "__main__":
    main()
