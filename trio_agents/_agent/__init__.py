"""The agent core: an agent's inbox, status and driver task; its turns and steps, with their
cancel scopes; the events it emits and the streams that follow one turn; asking before a
tool runs; the model's view of a session's records; `open_agent` for a standalone agent.

Modules here import the stores' records, the model and tool seams and the helpers at the
root; nothing here imports fibers, the registry or the runtime (tests/test_exports.py).
"""
