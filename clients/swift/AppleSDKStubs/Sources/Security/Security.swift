import Foundation
public typealias CFString = String
public typealias CFDictionary = [String: Any]
public typealias CFTypeRef = AnyObject
public typealias CFError = NSError
public typealias OSStatus = Int32
public final class CFAllocator: Sendable {}
public let kCFAllocatorDefault: CFAllocator? = nil
public final class SecAccessControl {}
public struct SecAccessControlCreateFlags: OptionSet, Sendable { public let rawValue: UInt; public init(rawValue: UInt) { self.rawValue = rawValue }
  public static let privateKeyUsage = Self(rawValue: 1 << 30); public static let biometryCurrentSet = Self(rawValue: 8)
  public static let biometryAny = Self(rawValue: 2); public static let userPresence = Self(rawValue: 1) }
public func SecAccessControlCreateWithFlags(_ a: CFAllocator?, _ p: Any, _ f: SecAccessControlCreateFlags, _ e: UnsafeMutablePointer<Unmanaged<CFError>?>?) -> SecAccessControl? { nil }
public let kSecAttrAccessibleWhenUnlockedThisDeviceOnly: CFString = "a", kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly: CFString = "f"
public let kSecClass: CFString = "c", kSecClassGenericPassword: CFString = "g", kSecAttrService: CFString = "s", kSecAttrAccount: CFString = "a",
  kSecValueData: CFString = "v", kSecAttrAccessible: CFString = "x", kSecReturnData: CFString = "r", kSecMatchLimit: CFString = "m", kSecMatchLimitOne: CFString = "1"
public func SecItemAdd(_ a: CFDictionary, _ r: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus { 0 }
public func SecItemCopyMatching(_ a: CFDictionary, _ r: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus { 0 }
public func SecItemDelete(_ a: CFDictionary) -> OSStatus { 0 }
public let errSecSuccess: OSStatus = 0, errSecItemNotFound: OSStatus = -25300
