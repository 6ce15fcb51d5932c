"""Model providers: one class per wire family (`openai_compat.py`, `anthropic.py`,
`google.py`, `echo.py`) behind `base.Provider`, picked by `registry.py` from the one provider
table (protocol/agent/providers.py); the outbound network policy every outbound call obeys
(`network.py`).

May import: protocol.
"""
