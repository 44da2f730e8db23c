// Package app is board's composition root, the only package that imports every service: it reads the
// configuration (flags and BOARD_* variables, every default in Default), starts the engines (the configured Redis,
// Kafka and SQL servers, or embedded ones), and builds each service with its outbox relay and its consumers, in the
// order of one table (services.go). Run returns a handle with the address of every listener; Shutdown stops them
// in reverse order of start. cmd/board parses a command line and calls into here; so do the end-to-end tests.
package app
