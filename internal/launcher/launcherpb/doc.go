// Package launcherpb is the generated node agent ↔ launcher protocol.
package launcherpb
