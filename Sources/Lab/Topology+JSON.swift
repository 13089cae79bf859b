import TunnelgateSettings

extension Topology {
    /// The longest node name: namespace names are `tgl-RUN-NODE` and stay readable.
    public static let maximumNodeNameLength = 24

    /// Parses and checks a topology. Every problem is reported with its key path
    /// (`links[2].b.node: "rooter" is not a node`), in file order.
    public static func parse(json bytes: [UInt8]) throws(ConfigurationError) -> Topology {
        let value: JSONValue
        do {
            value = try JSONParser.parse(bytes)
        } catch {
            throw ConfigurationError([ConfigProblem(path: "", reason: "not valid JSON: \(error)")])
        }
        var reader = TopologyReader()
        let topology = reader.topology(value)
        if !reader.problems.isEmpty { throw ConfigurationError(reader.problems) }
        return topology
    }
}

/// A name usable for a node: lower-case letters, digits and '-', starting with a letter.
func nodeNameProblem(_ name: String) -> String? {
    if name.isEmpty { return "must not be empty" }
    if name.count > Topology.maximumNodeNameLength { return "\(JSONValue.quoted(name)) is longer than \(Topology.maximumNodeNameLength) characters" }
    let ok = name.unicodeScalars.allSatisfy { ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "-" }
    if !ok || !("a"..."z").contains(name.unicodeScalars.first!) {
        return "\(JSONValue.quoted(name)) must be lower-case letters, digits and '-', starting with a letter"
    }
    return nil
}

private struct TopologyReader {
    var problems: [ConfigProblem] = []

    mutating func problem(_ path: String, _ reason: String) { problems.append(ConfigProblem(path: path, reason: reason)) }

    mutating func object(_ value: JSONValue, _ path: String, allowed: Set<String>) -> [(key: String, value: JSONValue)]? {
        guard case .object(let members) = value else {
            problem(path, "must be an object, not \(value.typeName)")
            return nil
        }
        for m in members where !allowed.contains(m.key) {
            problem(path.isEmpty ? m.key : "\(path).\(m.key)", "unknown key (known: \(allowed.sorted().joined(separator: ", ")))")
        }
        return members
    }

    mutating func string(_ value: JSONValue, _ path: String) -> String? {
        guard case .string(let s) = value else {
            problem(path, "must be a string, not \(value.typeName)")
            return nil
        }
        return s
    }

    mutating func array(_ value: JSONValue, _ path: String) -> [JSONValue]? {
        guard case .array(let items) = value else {
            problem(path, "must be an array, not \(value.typeName)")
            return nil
        }
        return items
    }

    mutating func address(_ value: JSONValue, _ path: String) -> IPAddress? {
        guard let s = string(value, path) else { return nil }
        guard let a = IPAddress(s) else {
            problem(path, "\(JSONValue.quoted(s)) is not an IPv4 or IPv6 address")
            return nil
        }
        return a
    }

    mutating func topology(_ value: JSONValue) -> Topology {
        var topology = Topology(name: "lab", nodes: [], links: [], client: nil)
        guard let members = object(value, "", allowed: ["name", "description", "nodes", "links", "client"]) else { return topology }
        var sawNodes = false, sawLinks = false
        for m in members {
            switch m.key {
            case "name":
                if let s = string(m.value, "name") {
                    if s.isEmpty { problem("name", "must not be empty") } else { topology.name = s }
                }
            case "description":
                _ = string(m.value, "description")
            case "nodes":
                sawNodes = true
                guard let nodes = object(m.value, "nodes", allowed: Set(objectKeys(m.value))) else { continue }
                for n in nodes { if let node = node(n.key, n.value, "nodes.\(n.key)") { topology.nodes.append(node) } }
                if nodes.isEmpty { problem("nodes", "must name at least one node") }
            case "links":
                sawLinks = true
                guard let items = array(m.value, "links") else { continue }
                for (i, item) in items.enumerated() { if let l = link(item, "links[\(i)]") { topology.links.append(l) } }
            case "client":
                topology.client = string(m.value, "client")
            default: break
            }
        }
        if !sawNodes { problem("nodes", "is required") }
        if !sawLinks { problem("links", "is required") }
        check(&topology, members: members)
        return topology
    }

    func objectKeys(_ value: JSONValue) -> [String] {
        if case .object(let members) = value { return members.map(\.key) }
        return []
    }

    mutating func node(_ name: String, _ value: JSONValue, _ path: String) -> Topology.Node? {
        if let reason = nodeNameProblem(name) { problem(path, "the node name \(reason)") }
        guard let members = object(value, path, allowed: ["forwarding", "routes", "nameservers", "dnsServer", "wan", "sysctls"]) else { return nil }
        var node = Topology.Node(name: name)
        for m in members {
            let p = "\(path).\(m.key)"
            switch m.key {
            case "forwarding":
                guard case .bool(let b) = m.value else { problem(p, "must be true or false, not \(m.value.typeName)"); continue }
                node.forwarding = b
            case "routes":
                guard let items = array(m.value, p) else { continue }
                for (i, item) in items.enumerated() { if let r = route(item, "\(p)[\(i)]") { node.routes.append(r) } }
            case "nameservers":
                guard let items = array(m.value, p) else { continue }
                for (i, item) in items.enumerated() { if let a = address(item, "\(p)[\(i)]") { node.nameservers.append(a) } }
            case "dnsServer":
                guard let server = object(m.value, p, allowed: ["records"]) else { continue }
                for s in server where s.key == "records" {
                    guard let records = object(s.value, "\(p).records", allowed: Set(objectKeys(s.value))) else { continue }
                    for r in records {
                        if r.key.isEmpty || r.key.contains(where: { $0 == "/" || $0 == " " || $0 == "#" }) {
                            problem("\(p).records", "\(JSONValue.quoted(r.key)) is not a DNS name")
                            continue
                        }
                        if let a = address(r.value, "\(p).records.\(r.key)") { node.dnsRecords.append((r.key, a)) }
                    }
                }
            case "wan":
                node.wan = string(m.value, p)
            case "sysctls":
                guard let items = object(m.value, p, allowed: Set(objectKeys(m.value))) else { continue }
                for s in items {
                    let parts = s.key.split(separator: ".", omittingEmptySubsequences: false)
                    if parts.first != "net" || parts.count < 2 || parts.contains(where: { $0.isEmpty || $0 == ".." }) {
                        problem("\(p).\(s.key)", "must be a key under net. (a network namespace has only those)")
                        continue
                    }
                    switch s.value {
                    case .string(let v): node.sysctls.append((s.key, v))
                    case .number(_, let literal): node.sysctls.append((s.key, literal))
                    default: problem("\(p).\(s.key)", "must be a string or a number, not \(s.value.typeName)")
                    }
                }
            default: break
            }
        }
        return node
    }

    mutating func route(_ value: JSONValue, _ path: String) -> Topology.Route? {
        guard let members = object(value, path, allowed: ["to", "via", "dev"]) else { return nil }
        var to: String?, via: IPAddress?, dev: String?
        for m in members {
            switch m.key {
            case "to": to = string(m.value, "\(path).to")
            case "via": via = address(m.value, "\(path).via")
            case "dev": dev = string(m.value, "\(path).dev")
            default: break
            }
        }
        guard let to else {
            if !members.contains(where: { $0.key == "to" }) { problem("\(path).to", "is required") }
            return nil
        }
        var destination: IPPrefix?
        if to == "default" {
            guard let via else {
                problem("\(path).to", "\"default\" needs \"via\" to tell IPv4 from IPv6")
                return nil
            }
            destination = via.family == .ipv4 ? IPPrefix("0.0.0.0/0") : IPPrefix("::/0")
        } else {
            destination = IPPrefix(to) ?? IPAddress(to).flatMap { IPPrefix(address: $0, length: $0.family.bitWidth) }
        }
        guard let destination else {
            problem("\(path).to", "\(JSONValue.quoted(to)) is not a prefix (10.0.0.0/8, 2001:db8::/32) or \"default\"")
            return nil
        }
        if !destination.isCanonical { problem("\(path).to", "\(destination) has host bits set (the network is \(destination.network))") }
        if let via, via.family != destination.family { problem("\(path).via", "\(via) is not of the family of \(destination)") }
        if via == nil && dev == nil { problem(path, "needs \"via\", \"dev\" or both") }
        return Topology.Route(destination: destination, gateway: via, interface: dev)
    }

    mutating func end(_ value: JSONValue, _ path: String) -> Topology.End? {
        guard let members = object(value, path, allowed: ["node", "interface", "addresses"]) else { return nil }
        var node: String?, interface: String?, addresses: [IPPrefix] = []
        for m in members {
            let p = "\(path).\(m.key)"
            switch m.key {
            case "node": node = string(m.value, p)
            case "interface":
                interface = string(m.value, p)
                if let i = interface, let reason = InterfaceName.problem(i) { problem(p, reason) }
            case "addresses":
                guard let items = array(m.value, p) else { continue }
                for (i, item) in items.enumerated() {
                    guard let s = string(item, "\(p)[\(i)]") else { continue }
                    guard s.contains("/"), let prefix = IPPrefix(s) else {
                        problem("\(p)[\(i)]", "\(JSONValue.quoted(s)) is not an address with a prefix length (10.0.0.2/24, fd00::2/64)")
                        continue
                    }
                    addresses.append(prefix)
                }
            default: break
            }
        }
        if node == nil { problem("\(path).node", "is required") }
        if interface == nil { problem("\(path).interface", "is required") }
        guard let node, let interface else { return nil }
        return Topology.End(node: node, interface: interface, addresses: addresses)
    }

    mutating func link(_ value: JSONValue, _ path: String) -> Topology.Link? {
        guard let members = object(value, path, allowed: ["name", "a", "b"]) else { return nil }
        var name: String?, a: Topology.End?, b: Topology.End?
        for m in members {
            switch m.key {
            case "name":
                name = string(m.value, "\(path).name")
                if let n = name, let reason = nodeNameProblem(n) { problem("\(path).name", "the link name \(reason)") }
            case "a": a = end(m.value, "\(path).a")
            case "b": b = end(m.value, "\(path).b")
            default: break
            }
        }
        for (key, v) in [("name", name as Any?), ("a", a as Any?), ("b", b as Any?)] where v == nil
            && !members.contains(where: { $0.key == key }) {
            problem("\(path).\(key)", "is required")
        }
        guard let name, let a, let b else { return nil }
        return Topology.Link(name: name, a: a, b: b)
    }

    /// Cross-references: nodes named by links exist, names are unique, routes and wan name interfaces the node has.
    mutating func check(_ t: inout Topology, members: [(key: String, value: JSONValue)]) {
        let nodes = Set(t.nodes.map(\.name))
        var linkNames: Set<String> = []
        var interfaces: [String: Set<String>] = [:]
        for (i, l) in t.links.enumerated() {
            if !linkNames.insert(l.name).inserted { problem("links[\(i)].name", "\(JSONValue.quoted(l.name)) names two links") }
            for (side, e) in [("a", l.a), ("b", l.b)] {
                if !nodes.contains(e.node) {
                    problem("links[\(i)].\(side).node", "\(JSONValue.quoted(e.node)) is not a node (nodes: \(t.nodes.map(\.name).joined(separator: ", ")))")
                    continue
                }
                if !interfaces[e.node, default: []].insert(e.interface).inserted || e.interface == "lo" {
                    problem("links[\(i)].\(side).interface", "\(JSONValue.quoted(e.interface)) is already an interface of node \(e.node)")
                }
            }
            if l.a.node == l.b.node { problem("links[\(i)]", "joins node \(l.a.node) to itself") }
        }
        for n in t.nodes {
            for (i, r) in n.routes.enumerated() {
                let p = "nodes.\(n.name).routes[\(i)]"
                if let dev = r.interface, !interfaces[n.name, default: []].contains(dev) {
                    problem("\(p).dev", "\(JSONValue.quoted(dev)) is not an interface of node \(n.name)")
                } else if r.interface == nil, t.interface(for: r, in: n.name) == nil, let gw = r.gateway {
                    problem("\(p).via", "no interface of node \(n.name) has an address whose prefix holds \(gw); name one with \"dev\"")
                }
            }
            if let wan = n.wan, !interfaces[n.name, default: []].contains(wan) {
                problem("nodes.\(n.name).wan", "\(JSONValue.quoted(wan)) is not an interface of node \(n.name)")
            }
        }
        if let client = t.client, !nodes.contains(client) {
            problem("client", "\(JSONValue.quoted(client)) is not a node")
        }
    }
}

extension ConfigurationError: ConfigurationErrorLike {
    var lines: [String] { problems.map(\.description) }
}
