"""Environment specs: models, loading with ``extends:``, JSON Schema."""

from envmgr.spec.load import LoadedSpec, deep_merge, load_spec
from envmgr.spec.models import API_VERSION, Spec, canonical_name

__all__ = ["API_VERSION", "LoadedSpec", "Spec", "canonical_name", "deep_merge", "load_spec"]
