internal import CH2O

extension HTTPResponse {
    /// This answer as the engine reads it, valid during `body`.
    func withEngineView(_ body: (UnsafePointer<counter_h2o_response>) -> Void) {
        let response = self
        var contentType = response.contentType
        contentType.withUTF8 { type in
            response.body.withUnsafeBufferPointer { bytes in
                var engineResponse = counter_h2o_response(
                    status: Int32(response.status),
                    content_type: type.withMemoryRebound(to: CChar.self) { $0.baseAddress },
                    content_type_length: type.count,
                    header_names: nil, header_name_lengths: nil, header_values: nil, header_value_lengths: nil,
                    header_count: 0,
                    body: bytes.baseAddress, body_length: bytes.count)
                guard !response.headers.isEmpty else { return body(&engineResponse) }
                // Names and values one after another in one buffer.
                var text: [UInt8] = []
                var lengths: [Int] = []
                for (name, value) in response.headers {
                    text += name.utf8
                    text += value.utf8
                    lengths += [name.utf8.count, value.utf8.count]
                }
                text.withUnsafeBufferPointer { text in
                    text.withMemoryRebound(to: CChar.self) { text in
                        var names: [UnsafePointer<CChar>?] = []
                        var values: [UnsafePointer<CChar>?] = []
                        var nameLengths: [Int] = []
                        var valueLengths: [Int] = []
                        var offset = 0
                        for index in stride(from: 0, to: lengths.count, by: 2) {
                            names.append(text.baseAddress.map { UnsafePointer($0 + offset) })
                            nameLengths.append(lengths[index])
                            offset += lengths[index]
                            values.append(text.baseAddress.map { UnsafePointer($0 + offset) })
                            valueLengths.append(lengths[index + 1])
                            offset += lengths[index + 1]
                        }
                        names.withUnsafeBufferPointer { names in
                            values.withUnsafeBufferPointer { values in
                                nameLengths.withUnsafeBufferPointer { nameLengths in
                                    valueLengths.withUnsafeBufferPointer { valueLengths in
                                        engineResponse.header_names = names.baseAddress
                                        engineResponse.header_values = values.baseAddress
                                        engineResponse.header_name_lengths = nameLengths.baseAddress
                                        engineResponse.header_value_lengths = valueLengths.baseAddress
                                        engineResponse.header_count = names.count
                                        body(&engineResponse)
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
