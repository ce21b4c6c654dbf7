// Package simulator is draxr's decision engine.
package simulator
