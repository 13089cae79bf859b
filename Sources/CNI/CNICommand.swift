/// CNI_COMMAND.
public enum CNICommand: String, Sendable, CaseIterable {
    case add = "ADD"
    case del = "DEL"
    case check = "CHECK"
    case version = "VERSION"
}
