import Foundation

/// NETunnelProviderProtocol as one JSON object holding every property, with providerConfiguration's
/// property-list types kept (PropertyListValue): the `protocol` object of the preferences file and
/// what the host hands the provider as `NETunnelProvider.protocolConfiguration`.
///
///     {"serverAddress": …, "username": …, "passwordReference": BASE64, "identityReference": BASE64,
///      "disconnectOnSleep": false, "includeAllNetworks": false, "excludeLocalNetworks": false,
///      "providerBundleIdentifier": …, "providerConfigurationPlist": TAGGED-DICTIONARY,
///      "interfaceName": "tg0", "arguments": […]}
///
/// Files written before property-list types were kept have `providerConfiguration` as plain JSON
/// instead of `providerConfigurationPlist`; it is still read.
extension NEVPNProtocol {
    /// The object; fails (`.configurationInvalid`, naming the key path) when providerConfiguration holds
    /// something that is not a property-list value.
    func tunnelgateObject() throws(NEVPNError) -> [String: Any] {
        var o: [String: Any] = ["includeAllNetworks": includeAllNetworks, "excludeLocalNetworks": excludeLocalNetworks,
                                "disconnectOnSleep": disconnectOnSleep]
        if let s = serverAddress { o["serverAddress"] = s }
        if let u = username { o["username"] = u }
        if let r = passwordReference { o["passwordReference"] = r.base64EncodedString() }
        if let r = identityReference { o["identityReference"] = r.base64EncodedString() }
        if let t = self as? NETunnelProviderProtocol {
            if let b = t.providerBundleIdentifier { o["providerBundleIdentifier"] = b }
            if let c = t.providerConfiguration {
                do throws(PropertyListValue.Failure) {
                    o["providerConfigurationPlist"] = try PropertyListValue(c, keyPath: "providerConfiguration").tagged
                } catch {
                    throw NEVPNError(.configurationInvalid, error.description)
                }
            }
            o["interfaceName"] = t.tunnelgateInterfaceName
            o["arguments"] = t.tunnelgateArguments
        }
        return o
    }

    /// The protocol an object describes (always an NETunnelProviderProtocol, the one kind Linux runs).
    /// Fails with `code`, naming `keyPath` and the key, when a value has the wrong type.
    static func tunnelgateDecode(_ o: [String: Any], keyPath: String,
                                 code: NEVPNError.Code = .configurationReadWriteFailed) throws(NEVPNError) -> NETunnelProviderProtocol {
        func fail(_ key: String, _ what: String) -> NEVPNError {
            NEVPNError(code, "\(keyPath.isEmpty ? "" : keyPath + ".")\(key): \(what)")
        }
        func string(_ key: String) throws(NEVPNError) -> String? {
            guard let v = o[key] else { return nil }
            guard let s = v as? String else { throw fail(key, "not a string") }
            return s
        }
        func bool(_ key: String) throws(NEVPNError) -> Bool {
            guard let v = o[key] else { return false }
            guard let n = v as? NSNumber, ["c", "B"].contains(String(cString: n.objCType)) else { throw fail(key, "not true or false") }
            return n.boolValue
        }
        func data(_ key: String) throws(NEVPNError) -> Data? {
            guard let s = try string(key) else { return nil }
            guard let d = Data(base64Encoded: s) else { throw fail(key, "not base64") }
            return d
        }
        let p = NETunnelProviderProtocol()
        p.serverAddress = try string("serverAddress")
        p.username = try string("username")
        p.passwordReference = try data("passwordReference")
        p.identityReference = try data("identityReference")
        p.disconnectOnSleep = try bool("disconnectOnSleep")
        p.includeAllNetworks = try bool("includeAllNetworks")
        p.excludeLocalNetworks = try bool("excludeLocalNetworks")
        p.providerBundleIdentifier = try string("providerBundleIdentifier")
        // Older files: plain JSON under providerConfiguration, read as the property-list values it holds.
        let (key, configuration): (String, PropertyListValue?)
        do throws(PropertyListValue.Failure) {
            if let tagged = o["providerConfigurationPlist"] {
                (key, configuration) = ("providerConfigurationPlist", try PropertyListValue(tagged: tagged, keyPath: "providerConfiguration"))
            } else if let plain = o["providerConfiguration"] {
                (key, configuration) = ("providerConfiguration", try PropertyListValue(plain, keyPath: "providerConfiguration"))
            } else {
                (key, configuration) = ("", nil)
            }
        } catch {
            throw NEVPNError(code, "\(keyPath.isEmpty ? "" : keyPath + ".")\(error.description)")
        }
        if let configuration {
            guard case .dictionary(let d) = configuration else { throw fail(key, "not a dictionary") }
            p.providerConfiguration = d.mapValues(\.any)
        }
        if let n = try string("interfaceName") { p.tunnelgateInterfaceName = n }
        if let a = o["arguments"] {
            guard let list = a as? [String] else { throw fail("arguments", "not an array of strings") }
            p.tunnelgateArguments = list
        }
        return p
    }
}

extension NETunnelProviderProtocol {
    /// Every property as bytes (the object above as JSON): what the host hands the provider process so
    /// that `protocolConfiguration` is the saved configuration, property-list types and all.
    public func tunnelgateEncoded() throws(NEVPNError) -> [UInt8] {
        let object = try tunnelgateObject()
        do { return Array(try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) } catch {
            throw NEVPNError(.configurationInvalid, "encoding the protocol configuration: \(error)")
        }
    }

    /// The protocol `tunnelgateEncoded()` wrote.
    public static func tunnelgateDecoded(_ bytes: [UInt8]) throws(NEVPNError) -> NETunnelProviderProtocol {
        guard let o = (try? JSONSerialization.jsonObject(with: Data(bytes))) as? [String: Any] else {
            throw NEVPNError(.configurationInvalid, "the protocol configuration is not a JSON object")
        }
        return try tunnelgateDecode(o, keyPath: "protocolConfiguration", code: .configurationInvalid)
    }
}

extension NEVPNProtocol: NSCopying {
    /// A deep copy (as iOS's NSCopying): every property, providerConfiguration's values included.
    public func copy(with zone: NSZone? = nil) -> Any {
        guard let object = try? tunnelgateObject(),
              let copy = try? NEVPNProtocol.tunnelgateDecode(object, keyPath: "") else {
            // providerConfiguration holds a non-property-list value: copied by reference.
            let p = NETunnelProviderProtocol()
            p.serverAddress = serverAddress; p.username = username
            p.passwordReference = passwordReference; p.identityReference = identityReference
            p.disconnectOnSleep = disconnectOnSleep
            p.includeAllNetworks = includeAllNetworks; p.excludeLocalNetworks = excludeLocalNetworks
            if let t = self as? NETunnelProviderProtocol {
                p.providerBundleIdentifier = t.providerBundleIdentifier; p.providerConfiguration = t.providerConfiguration
                p.tunnelgateInterfaceName = t.tunnelgateInterfaceName; p.tunnelgateArguments = t.tunnelgateArguments
            }
            return p
        }
        return copy
    }
}
