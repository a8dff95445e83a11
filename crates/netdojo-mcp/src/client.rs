//! An MCP client as a netdojo environment (to do).
