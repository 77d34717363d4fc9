"""The web view (``rolecall web``, web.md): a Starlette app over the store port and the bus.

Its dependencies are the optional extra ``rolecall[web]``; nothing here is imported
unless the web view is used. It adds no logic to the runtime: sessions it runs are
ordinary :func:`rolecall.open_session` sessions, and the pages read the store.
"""
