"""TEST DOUBLE placeholder, NOT FlashInfer: an empty module named ``flashinfer``.

A real SGLang environment has flashinfer-python; ``envmgr bench`` asks the environment which
feature modules it can import (``importlib.util.find_spec``) before it launches a config whose
flags need one (``--moe-a2a-backend flashinfer``). This placeholder lets the double's
environment answer as a real one would; nothing imports anything from it.
"""

__version__ = "0+double"
