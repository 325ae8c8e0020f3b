//! Condition probes (`process`, `file`, `disk`, `memory`, `load`, `tcp`, `http`): a watch job
//! pings when its probe finds the condition healthy.
