"""Events: the outbox, recorded in the state commit that records each version (`outbox`), and
delivery after that commit to a JSON Lines file and a Standard Webhooks endpoint (`delivery`).
"""
