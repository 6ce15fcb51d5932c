"""Operations: what the people running a server see: the health answer (`health.py`),
Prometheus metrics (`metrics.py`), log formats (`logs.py`), the access log (`accesslog.py`) and
this build's version (`version.py`). Leaf modules that every layer may report through.

May import: protocol.
"""
