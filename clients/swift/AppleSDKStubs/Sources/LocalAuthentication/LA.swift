import Foundation
open class LAContext: NSObject { open var localizedReason: String = "" }
