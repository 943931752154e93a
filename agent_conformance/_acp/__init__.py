"""The ACP mode of the conformance suite (`agent-conformance --acp -- CMD ...`): a
scripted OpenAI-compatible endpoint, a client driving any ACP agent over stdio, and the
state machine with its named properties. Private: the command line is its interface."""
