//! Building and sending pings to a heartbeat check's ping URL.
