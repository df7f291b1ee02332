// The bodies the service sends and takes are defined once, in CounterWire; apps get them with
// `import CounterClient`.
@_exported import CounterWire
