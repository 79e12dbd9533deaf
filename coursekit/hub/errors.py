"""The hub's one error: ``HubError``, something that stops the hub from starting."""


class HubError(Exception):
    """Something that stops the hub from starting, said in plain words with what to change."""
